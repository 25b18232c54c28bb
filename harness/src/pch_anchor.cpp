// Anchors the precompiled header shared by the problem plugins.
