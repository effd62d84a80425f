"""A keyword spotter as users write it: nn.LSTM over MFCC frames, Linear on the last step."""
import torch, torch.nn as nn
class KWS(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(10, 24, batch_first=True)
        self.fc = nn.Linear(24, 4)
    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])
torch.manual_seed(0)
ModelUnderTest = KWS().eval()
ModelInputs = (torch.randn(1, 8, 10),)
