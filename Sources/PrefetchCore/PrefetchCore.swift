// The PrefetchCore target: config protocol, page matching and request composition.
