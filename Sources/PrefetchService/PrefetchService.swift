// The PrefetchService target; its implementation lands in its own change.
