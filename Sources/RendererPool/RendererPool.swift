// The RendererPool target; its implementation lands in its own change.
