"""The data source's ``kafka.*`` options as keyword arguments of kafka-python's clients: Java client names mapped to
kafka-python's, values converted to the type of kafka-python's defaults, the options Spark's Kafka source refuses
refused here too, and the others passed through where kafka-python has them, with a warning where it does not
(:func:`kafka_client_config`; :mod:`zkconsumer.spark.options` calls it while parsing). The security keys
(``kafka.security.protocol``, ``kafka.ssl.*`` with the Java stores, ``kafka.sasl.*``) are not handled here but by
:class:`~zkconsumer.kafka_security.KafkaSecurity`."""
from __future__ import annotations

import logging
from typing import Dict, Mapping

from ..errors import ConfigError

__all__ = ["kafka_client_config", "warn_once", "GROUP_ID_WARNING"]

log = logging.getLogger("zkconsumer.spark")

# Spark's warning for kafka.group.id (KafkaSourceProvider.CUSTOM_GROUP_ID_ERROR_MESSAGE), for the source's consumers
GROUP_ID_WARNING = ("Kafka option 'kafka.group.id' has been set on this query, it is not recommended to set this "
                    "option. This option is unsafe to use since multiple concurrent queries or sources using the same "
                    "group id will interfere with each other as they are part of the same consumer group. (The "
                    "zkconsumer source's Kafka consumers use it as their group.id but never join the group nor commit "
                    "to it; the legacy group the source is a member of is the group.id option.)")
_WARNED: set = set()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning once per process (options are parsed again in every Spark call)."""
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


# kafka.* options Spark's Kafka source refuses, and why (KafkaSourceProvider.validateGeneralOptions)
_REFUSED_KAFKA = {
    "auto.offset.reset": "set the source option startingOffsets to earliest or latest instead: the source decides "
                         "which offsets are read (where the group has no committed offset), not the Kafka consumer",
    "key.deserializer": "keys are always read as bytes; deserialize them with DataFrame operations",
    "value.deserializer": "values are always read as bytes; deserialize them with DataFrame operations",
    "enable.auto.commit": "the source commits to the legacy group itself, after Spark committed a batch",
    "interceptor.classes": "interceptors can modify the records, so they are not safe",
}
# Java client names whose kafka-python keyword differs (the rest map by '.' -> '_')
_JAVA_TO_PY = {"sasl.kerberos.service.name": "sasl_kerberos_service_name"}
# kafka-python settings that are objects, or that the source sets itself
_NOT_SETTABLE = {"bootstrap_servers", "kafka_client", "selector", "metric_reporters", "socket_options", "ssl_context",
                 "sasl_oauth_token_provider", "default_offset_commit_callback", "partition_assignment_strategy",
                 "consumer_timeout_ms", "group_instance_id", "exclude_internal_topics", "allow_auto_create_topics"}
_CHOICES = {"security_protocol": ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
            "sasl_mechanism": ("PLAIN", "GSSAPI", "OAUTHBEARER", "SCRAM-SHA-256", "SCRAM-SHA-512"),
            "isolation_level": ("read_uncommitted", "read_committed")}


def _jaas_credentials(value):
    """``username`` and ``password`` of a PlainLoginModule / ScramLoginModule ``sasl.jaas.config``."""
    import re
    if not re.search(r"(PlainLoginModule|ScramLoginModule)\s+required", value):
        raise ConfigError("kafka.sasl.jaas.config", "<hidden>", "a PlainLoginModule or ScramLoginModule 'required' "
                          "entry with username=\"...\" password=\"...\" (other login modules: kafka-python has "
                          "kafka.sasl.kerberos.* for GSSAPI)")
    found = dict(re.findall(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"', value))
    if set(found) != {"username", "password"}:
        raise ConfigError("kafka.sasl.jaas.config", "<hidden>", 'username="..." and password="..." entries')
    return {"sasl_plain_username": found["username"], "sasl_plain_password": found["password"]}


def kafka_client_config(kafka_options: Mapping[str, str]) -> Dict[str, object]:
    """The ``kafka.*`` options (names without the ``kafka.`` prefix, any case; the security keys already taken out) as
    keyword arguments of the kafka-python clients the source makes (the driver's log-end probe and the executors'
    readers).

    Java client names map to kafka-python's (``request.timeout.ms`` -> ``request_timeout_ms``,
    ``sasl.kerberos.service.name`` -> ``sasl_kerberos_service_name``, ``sasl.jaas.config`` with
    PlainLoginModule/ScramLoginModule -> ``sasl_plain_username``/``_password``); kafka-python's own names
    (``kafka.ssl_cafile``) are accepted too. Refused as in Spark's Kafka source: ``auto.offset.reset``,
    ``key.deserializer``, ``value.deserializer``, ``enable.auto.commit``, ``interceptor.classes``. ``group.id`` is
    accepted with Spark's warning (:data:`GROUP_ID_WARNING`). A name kafka-python does not have is ignored with a
    warning (the Java client, too, only warns about unknown configurations). Values are converted to the type of
    kafka-python's default. Error messages never show a value that may be a secret."""
    from kafka import KafkaConsumer
    defaults = KafkaConsumer.DEFAULT_CONFIG
    opts = {str(k).lower(): str(v) for k, v in kafka_options.items()}
    out: Dict[str, object] = {}
    for key, value in sorted(opts.items()):
        name = "kafka." + key
        secret = "password" in key or "jaas" in key or key.endswith(".key") or "secret" in key
        shown = "<hidden>" if secret else value
        if key in _REFUSED_KAFKA:
            raise ConfigError(name, value, "not supported", _REFUSED_KAFKA[key])
        if key == "bootstrap.servers":
            # a source option of its own
            continue
        if key == "sasl.jaas.config":
            out.update(_jaas_credentials(value))
            continue
        py = _JAVA_TO_PY.get(key, key.replace(".", "_"))
        if py in ("auto_offset_reset", "key_deserializer", "value_deserializer", "enable_auto_commit"):
            raise ConfigError(name, shown, "not supported", _REFUSED_KAFKA[py.replace("_", ".")])
        if py == "group_id":
            warn_once(GROUP_ID_WARNING)
            out[py] = value.strip()
            continue
        if py not in defaults or py in _NOT_SETTABLE:
            warn_once("%s is not a setting of kafka-python's consumer (%s): ignored (the source's Kafka clients are "
                      "kafka-python's; the Java client, too, ignores configurations it does not know)"
                      % (name, "it has no %r" % py if py not in defaults else "the source sets it itself"))
            continue
        if py == "ssl_check_hostname":
            out[py] = value.strip().lower() == "https"
            continue
        default = defaults[py]
        try:
            if isinstance(default, bool):
                b = value.strip().lower()
                if b not in ("true", "false"):
                    raise ValueError(value)
                conv: object = b == "true"
            elif isinstance(default, int):
                conv = int(value.strip())
            elif isinstance(default, float):
                conv = float(value.strip())
            elif py == "api_version":
                conv = tuple(int(x) for x in value.strip().split("."))
            else:
                conv = value.strip() if not secret else value
        except ValueError:
            raise ConfigError(name, shown, "a value of the type of kafka-python's %s (%s)"
                              % (py, type(default).__name__)) from None
        choices = _CHOICES.get(py)
        if choices is not None:
            conv = str(conv).upper() if py != "isolation_level" else str(conv).lower()
            if conv not in choices:
                raise ConfigError(name, value, ", ".join(choices))
        out[py] = conv
    return out
