"""The fast paths: the same functions as lev.py and model.py's plain head, computed faster and in less memory.

    lev_fast.py      FastLEV: LEV with each distinct id once, steps 4-6 fused, a materialised table
    lev_kernel.cpp   LEV's step 3 tail and steps 4-6 in C++ (CPU)
    head.py          the output head's loss in blocks of positions, never holding the (B T, V) logits
    head_kernel.cpp  each block's loss and softmax - one-hot in C++ (CPU)
    native.py        builds the two C++ kernels on first use (announced), or falls back to PyTorch

Read lev.py and model.py first: every function here is checked against them (tests/test_fast.py, test_head.py).
"""
