"""Network faults between the regions of a local cluster: the actions that cut and heal the link
proxies (``magnetar.local.link_proxy``) that carry cross-region traffic."""
