"""Robot-side runtime of nav_policy: numpy and onnxruntime only, never torch."""
