import sys

try:
    from .cli import entry
except KeyboardInterrupt:  # Ctrl-C while Python loads perfonto: no traceback
    sys.exit(130)

sys.exit(entry())
