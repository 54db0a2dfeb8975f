from __future__ import annotations

from hookbus.serve.quickpath import main

raise SystemExit(main())
