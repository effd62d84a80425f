"""A small CNN trained on scikit-learn's 8x8 digits (1,797 images shipped with scikit-learn, no download).

Trained here, at import, deterministically on the CPU in a few seconds: a fixed 80/20 split (seeded permutation),
torch.manual_seed(0), fixed epochs. `python -m emlkit.models.digits_cnn --write-split out.npz` writes the held-out
split as x (N x 1 x 8 x 8 float32, pixels scaled to [0, 1]) and y (N labels, int64) for `emlkit evaluate`;
`--write-calibration calib.npz` the first 256 training images (x) for `--calibration`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HELD_OUT = 0.2
EPOCHS = 15
BATCH = 64
CALIBRATION_SAMPLES = 256


def digits_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): images as N x 1 x 8 x 8 float32 in [0, 1], labels int64."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(y))
    n_test = int(round(HELD_OUT * len(y)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def train() -> DigitsCNN:
    """The model trained on the training split: the same weights on every run (seeded; one thread, so the
    reductions' order does not depend on the machine; about a second)."""
    x_train, y_train, _, _ = digits_split()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(x_train, y_train)
    finally:
        torch.set_num_threads(threads)


def _train(x_train: np.ndarray, y_train: np.ndarray) -> DigitsCNN:
    torch.manual_seed(0)
    net = DigitsCNN()
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    gen = torch.Generator().manual_seed(0)
    net.train()
    for _ in range(EPOCHS):
        perm = torch.randperm(len(yt), generator=gen)
        for i in range(0, len(yt), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            nn.functional.cross_entropy(net(xt[idx]), yt[idx]).backward()
            opt.step()
    return net.eval()


def write_split(path: str | Path) -> Path:
    """The held-out split as an .npz: x (N x 1 x 8 x 8 float32), y (N int64)."""
    _, _, x_test, y_test = digits_split()
    path = Path(path)
    np.savez(path, x=x_test, y=y_test)
    return path


def write_calibration(path: str | Path, n: int = CALIBRATION_SAMPLES) -> Path:
    """The first N training images as an .npz (x only), for `--calibration`."""
    x_train = digits_split()[0]
    path = Path(path)
    np.savez(path, x=x_train[:n])
    return path


ModelUnderTest = train()
ModelInputs = (torch.from_numpy(digits_split()[2][:1].copy()),)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emlkit.models.digits_cnn", description=__doc__.splitlines()[0])
    ap.add_argument("--write-split", metavar="OUT.npz", help="write the held-out split here (x, y)")
    ap.add_argument("--write-calibration", metavar="OUT.npz", help=f"write the first {CALIBRATION_SAMPLES} training "
                                                                   "images here (x), for --calibration")
    args = ap.parse_args(argv)
    if not (args.write_split or args.write_calibration):
        ap.error("give --write-split and/or --write-calibration")
    if args.write_calibration:
        print(f"{write_calibration(args.write_calibration)}: {CALIBRATION_SAMPLES} training images")
    if not args.write_split:
        return 0
    out = write_split(args.write_split)
    with torch.no_grad():
        _, _, x, y = digits_split()
        acc = float((ModelUnderTest(torch.from_numpy(x)).argmax(1).numpy() == y).mean())
    print(f"{out}: {len(y)} held-out samples (float top-1 {100 * acc:.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
