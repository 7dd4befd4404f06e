// The PrefetchFetcher target; its implementation lands in its own change.
