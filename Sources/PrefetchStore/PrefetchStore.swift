// The PrefetchStore target; its implementation lands in its own change.
