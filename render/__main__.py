"""python -m render [--check]: render.docs.main (the markers and the commands: the package's docstring)."""
from render.docs import main

if __name__ == "__main__":
    main()
