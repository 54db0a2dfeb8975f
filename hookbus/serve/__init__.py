"""``hookbus serve`` and its clients: the server (``server``, ``run``, ``listener``), its
wire protocol (``protocol``, ``errorcodes``), where they meet (``rendezvous``), the Python
clients (``client``, public as ``hookbus.client``) and the command line's quick path to a
live server (``quickpath``, where ``hookbus`` starts).

An edge of the engine: it imports hookbus's core, and nothing of the core imports it. This
file imports nothing: the quick path loads only what it needs.
"""

from __future__ import annotations
