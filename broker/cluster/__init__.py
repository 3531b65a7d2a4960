"""The cluster room: the cluster metadata (topics, configs, quotas, SCRAM credentials, features)
kept in a snapshot and a journal (``metadata``), the controller that changes it (``controller``),
client quotas (``quotas``) and SCRAM credentials (``scram_credentials``)."""
