"""Clear errors for a Kafka client that could not connect: which servers, which security settings, and why.

kafka-python reports a failed TLS handshake or SASL authentication during bootstrap only in its log and then
raises ``Unable to bootstrap from ...``. :func:`connect_error_text` adds what an operator needs: the servers (the
listener), ``security.protocol``, the SASL mechanism and user (never the password), and the likely cause, found by
one probe of the first server: TCP connect, then for SSL/SASL_SSL a TLS handshake with the same CA and host name
check as the client (a certificate error is then named as such). When TCP and TLS both succeed and the client
still failed, a SASL client was refused: wrong user or password, or a mechanism the listener does not enable.
"""
from __future__ import annotations

import socket
import ssl
from typing import Optional, Sequence, Union

from ..errors import ClusterUnavailableError, KafkaSecurityError
from ..core.kafka_security import PLAINTEXT, KafkaSecurity

__all__ = ["connect_error", "connect_error_text", "probe"]


def _servers_list(servers: Union[str, Sequence[str]]) -> list:
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    return [s.strip() for s in items if s and s.strip()]


def probe(server: str, security: KafkaSecurity, timeout: float = 3.0) -> Optional[str]:
    """What is wrong with ``server`` below the Kafka protocol (TCP, TLS), or None if both work; a TLS problem starts
    with ``the TLS handshake``."""
    host, _, port = server.rpartition(":")
    host = host.strip("[]")
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, ValueError) as e:
        return "cannot open a TCP connection to %s (%s)" % (server, e)
    try:
        if security.uses_ssl:
            ctx = ssl.create_default_context(cafile=security.cafile)
            ctx.check_hostname = security.check_hostname
            if security.certfile:
                ctx.load_cert_chain(security.certfile, security.keyfile, password=security.key_password)
            try:
                tls = ctx.wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as e:
                return ("the TLS handshake with %s failed: the broker's certificate was not accepted (%s); is ssl.cafile "
                        "the CA that signed it%s?" % (server, e.verify_message or e,
                                                      ", and does it name this host" if security.check_hostname
                                                      else ""))
            except (ssl.SSLError, OSError) as e:
                return ("the TLS handshake with %s failed (%s); is this an %s listener?"
                        % (server, e, security.protocol))
            tls.close()
    finally:
        sock.close()
    return None


def connect_error(what: str, servers: Union[str, Sequence[str]], security: Optional[KafkaSecurity],
                  error: BaseException) -> ClusterUnavailableError:
    """:class:`KafkaSecurityError` when the probe shows a TLS or SASL refusal, else ClusterUnavailableError; the
    message is :func:`connect_error_text`'s."""
    text = connect_error_text(what, servers, security, error)
    refused = "; the TLS handshake" in text or "refused the SASL authentication" in text
    return KafkaSecurityError(text) if refused else ClusterUnavailableError(text)


def connect_error_text(what: str, servers: Union[str, Sequence[str]], security: Optional[KafkaSecurity],
                       error: BaseException, diagnose: bool = True) -> str:
    """One line: ``cannot <what> at <servers> (<security>): <cause>; <diagnosis>``."""
    security = security or PLAINTEXT
    listed = _servers_list(servers)
    text = "cannot %s at %s (%s): %s: %s" % (what, ",".join(listed) or "(no servers)", security.describe(),
                                            type(error).__name__, error)
    if not diagnose or not listed:
        return text
    problem = probe(listed[0], security)
    if problem is not None:
        return text + "; " + problem
    if security.uses_sasl:
        return text + ("; TCP%s to %s works, so the broker refused the SASL authentication: wrong user or password "
                       "for sasl.mechanism=%s, that mechanism not enabled on this listener, or not a %s listener"
                       % (" and TLS" if security.uses_ssl else "", listed[0], security.mechanism, security.protocol))
    return text
