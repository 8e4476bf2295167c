"""HTTP layer: dependencies, error rendering and the routers. Routes hold no SQL."""
