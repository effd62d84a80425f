from emlkit.cli import main

raise SystemExit(main())
