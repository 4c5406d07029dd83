"""``python -m statekit …``: the same commands as the ``statekit`` console script."""

from statekit.cli.main import main

if __name__ == "__main__":
    main()
