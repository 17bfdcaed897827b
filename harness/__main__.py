"""``python -m harness`` runs the same CLI as the ``harness`` console script."""

from harness._entry import run

if __name__ == "__main__":
    run()
