"""``python -m reference_pipeline …``: same commands as ``statekit pipeline …``."""

from reference_pipeline.cli import cli
from toolkit.cli.runner import exit_with

if __name__ == "__main__":
    exit_with(cli, "python -m reference_pipeline")
