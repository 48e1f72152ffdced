"""One module per CLI command. Each defines ``register(subparsers)``, which adds its parser and sets
``func`` (a callable taking the parsed args and returning the exit code). ``COMMANDS`` lists them in
help order; adding a command is adding a module and one name here."""

COMMANDS = ["run", "analyze", "emulate", "check", "diff", "codegen", "docs", "explain", "test", "validate", "project",
            "sweep", "sensitivity", "compare", "coverage", "validate-emulator", "emulator-quantities", "calibrate", "import",
            "export", "align", "timeline", "serve", "report"]
