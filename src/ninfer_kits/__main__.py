from ninfer_kits.cli import main

raise SystemExit(main())
