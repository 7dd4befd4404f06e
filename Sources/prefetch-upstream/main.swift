print("prefetch-upstream")
