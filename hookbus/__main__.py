from __future__ import annotations

from hookbus.quickpath import main

raise SystemExit(main())
