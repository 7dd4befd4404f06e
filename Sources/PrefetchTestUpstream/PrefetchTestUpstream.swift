// The PrefetchTestUpstream target; its implementation lands in its own change.
