"""The ZooKeeper adapter (kazoo): :mod:`.client` (clients for a connect string, their listener and bootstrap from the
broker registry), :mod:`.auth` (digest and SASL credentials, ACLs), :mod:`.handler` (kazoo's select on one ``poll``)
and :mod:`.multi` (the one-pass setData/check multi-op the offset store commits with)."""
