"""paramserver.Error, raised by the compiled module for every failed call."""


class Error(RuntimeError):
    """A call to the parameter servers (or etcd) failed.

    Attributes:
        code: the status code's name, as in absl and gRPC: "UNAVAILABLE",
            "DEADLINE_EXCEEDED", "NOT_FOUND", "INVALID_ARGUMENT",
            "FAILED_PRECONDITION", "ALREADY_EXISTS", "UNAUTHENTICATED", ...
        message: the C++ client's message, naming the server, table or keys
            and what to check next.
    """

    def __init__(self, code: str, message: str) -> None:
        # Both in args, so that the error pickles (multiprocessing) and
        # compares as itself.
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


Error.__module__ = "paramserver"
