"""The broker: the composition root (``broker.broker``) that builds every service and injects the
coordinators' ports (``coordinator_ports``), the typed view handlers get (``services``), and its
rooms: ``net``, ``handlers``, ``replica``, ``config``, ``cluster``, ``ops``. The top floor: it
imports coordinator, storage and protocol; nothing below imports it."""
