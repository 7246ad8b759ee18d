"""Network faults between the regions of a local cluster: the link proxies that carry
cross-region traffic, and the actions that cut and heal them."""
