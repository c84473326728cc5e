"""`kbus zookeeper-security-migration`: Kafka's zookeeper-security-migration.sh (ZkSecurityMigrator), with its
flags: set Kafka's znode ACLs on an existing cluster (`--zookeeper.acl secure`) or open them again (`unsecure`)."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from kbus.cli.app import app
from kbus.common.broker_config import ConfigError
from kbus.common.errors import KafkaError

_quiet = logging.getLogger("kbus.cli.zk_security_migration.kazoo")
_quiet.setLevel(logging.CRITICAL)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"ERROR: {message}", err=True)
    return typer.Exit(1)


@app.command("zookeeper-security-migration")
def zookeeper_security_migration(
    acl: Annotated[str, typer.Option("--zookeeper.acl", help="secure or unsecure")],
    connect: Annotated[str, typer.Option("--zookeeper.connect", help="host:port, optionally /chroot")],
    session_timeout: Annotated[int, typer.Option("--zookeeper.session.timeout", help="ms")] = 30000,
    connection_timeout: Annotated[int, typer.Option("--zookeeper.connection.timeout", help="ms")] = 30000,
    tls_config_file: Annotated[
        Path | None,
        typer.Option("--zk-tls-config-file", help="zookeeper.ssl.* and zookeeper.clientCnxnSocket keys"),
    ] = None,
) -> None:
    """Set Kafka's ACLs on the znodes of a cluster (secure: creator-all + world-read, creator only on SCRAM
    credentials), as the identity this tool authenticates as (JAAS Client section in KAFKA_OPTS, TLS keystore)."""
    if acl not in ("secure", "unsecure"):
        raise _fail(f"--zookeeper.acl must be secure or unsecure, got {acl}")
    # kazoo, imported only where ZooKeeper is used
    from kbus.zk.security import JAAS_PROPERTY, ZkClientSecurity
    from kbus.zk.security import tls_config_file as tls_config_file_props

    try:
        tls_config = tls_config_file_props(str(tls_config_file)) if tls_config_file is not None else None
        security = ZkClientSecurity.for_tool(os.environ, tls_config)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if not security.authenticated:
        # Kafka's tool refuses too: a secure ACL would belong to nobody, an unsecure one could not be set
        raise _fail(
            "No JAAS configuration file has been specified and no TLS client certificate has been specified. "
            f"Please make sure that you set the system property {JAAS_PROPERTY} (KAFKA_OPTS=-D{JAAS_PROPERTY}=FILE) "
            "or provide a ZooKeeper client TLS configuration via --zk-tls-config-file <filename> identifying at "
            "least zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location"
        )
    from kazoo.exceptions import KazooException

    from kbus.zk.client import KafkaZkClient
    from kbus.zk.security_migration import migrate

    secure = acl == "secure"
    try:
        zk = KafkaZkClient.connect(
            connect, session_timeout / 1000, connection_timeout / 1000, logger=_quiet,
            security=dataclasses.replace(security, secure_acls=secure),
        )  # fmt: skip
    except KafkaError as exc:
        raise _fail(str(exc)) from None
    try:
        count = migrate(zk.zk, secure)
    except KazooException as exc:
        raise _fail(f"ZooKeeper refused the change ({type(exc).__name__}): run the tool as the identity that "
                    "owns the znodes") from None  # fmt: skip
    finally:
        zk.close()
    typer.echo(f"Set {acl} ACLs on {count} znodes under {connect}")
