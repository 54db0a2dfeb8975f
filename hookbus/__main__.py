from __future__ import annotations

from hookbus.cli import main

raise SystemExit(main())
