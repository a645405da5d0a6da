"""distributed/protocol.py's pure parts: a node's error brought back by PL/Proxy becomes the
node's own (SQLSTATE, message and hint without PL/Proxy's and PL/Python's prefixes), and a
connection that failed becomes one clear error that names no connect string."""
from deid.distributed import protocol
from deid.errors import REFUSAL_MESSAGE


def make_sqlstate(code):
    """PostgreSQL's MAKE_SQLSTATE: 6 bits a character, the first lowest."""
    return sum(((ord(ch) - ord("0")) & 0x3F) << (6 * i) for i, ch in enumerate(code))


class SPIError(Exception):
    def __init__(self, message, sqlstate=None, spidata=None):
        super().__init__(message)
        self.sqlstate, self.spidata = sqlstate, spidata


def test_deids_own_sqlstate_is_decoded_from_spidata():
    e = SPIError("x", spidata=(make_sqlstate("DE001"), None, None))
    assert protocol.sqlstate(e) == "DE001"
    assert protocol.sqlstate(SPIError("x", sqlstate="42501")) == "42501"


def test_a_remote_error_is_the_nodes_own():
    e = SPIError("deid._dist_store(11): [warehouse] REMOTE ERROR: plpy.SPIError: plpy.Error: "
                 + REFUSAL_MESSAGE,
                 spidata=(make_sqlstate("DE001"), None, "Remote hint: Without SELECT ..."))
    err = protocol.remote_error(e)
    assert (err.sqlstate, err.message, err.hint) == ("DE001", REFUSAL_MESSAGE, "Without SELECT ...")
    assert err.detail is None


def test_a_connection_that_failed_names_no_connect_string():
    e = SPIError("PL/Proxy function deid._dist_ping_on(2): could not connect to server: "
                 "host=/run/node1 port=5434 dbname=w", sqlstate="08006")
    err = protocol.remote_error(e)
    assert err.sqlstate == protocol.UNREACHABLE and err.hint
    assert "host=" not in err.message and "dbname" not in err.message
