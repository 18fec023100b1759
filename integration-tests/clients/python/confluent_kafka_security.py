"""confluent-kafka (librdkafka) against a tidelog that requires logins and
checks ACLs (docs/SECURITY.md).

Phases (the server is restarted with kill -9 between them by the test):

setup: the bootstrap super user `admin` logs in with SCRAM-SHA-512;
creates topics `orders-1` and `secret`, and the user `alice`
(SCRAM-SHA-256) with AlterUserScramCredentials; DescribeUserScramCredentials
lists both. alice (a new client per check: librdkafka remembers a topic's
authorization failure) is refused WRITE on `orders-1`
(TOPIC_AUTHORIZATION_FAILED); the admin grants her WRITE and READ on the
prefix `orders-` and READ on group `g1` (CreateAcls, DescribeAcls shows
them); she produces, sees only `orders-1` in Metadata, consumes it in
group `g1` and commits. A DENY of READ on `orders-1` for every user beats
her ALLOW. A wrong password fails SASL authentication and produces
nothing.

after-restart: the user, the ACLs (DENY included) and the committed offset
came back; the admin deletes the DENY (DeleteAcls answers it), alice reads
again; the admin deletes alice; her next login fails.

Usage: confluent_kafka_security.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT PHASE
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tidelog_check import check, run

PHASE = sys.argv.pop(3)
KAFKA = sys.argv.pop(2)
ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-pw"
TIMEOUT_S = 20


def conf(user, password, mechanism):
    return {
        "bootstrap.servers": KAFKA,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def admin():
    return AdminClient(conf("admin", ADMIN_PASSWORD, "SCRAM-SHA-512"))


def alice_conf(password=ALICE_PASSWORD):
    return conf("alice", password, "SCRAM-SHA-256")


def produce_as_alice(value, password=ALICE_PASSWORD):
    """The delivery error of one record alice produces (None: delivered),
    and the client errors seen."""
    seen = []
    producer = Producer({**alice_conf(password), "error_cb": seen.append, "message.timeout.ms": 10000})
    delivered = []
    try:
        producer.produce("orders-1", value, callback=lambda e, m: delivered.append(e))
    except Exception as e:  # noqa: BLE001 - librdkafka raises what it knows
        return e, seen
    producer.flush(TIMEOUT_S)
    return (delivered[0] if delivered else "undelivered"), seen


def read_as_alice(group="g1"):
    """Values alice reads from orders-1 in `group` (committing), and the
    first error."""
    consumer = Consumer({**alice_conf(), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["orders-1"])
    values, error = [], None
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and not values and error is None:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() != KafkaError._PARTITION_EOF:
                error = message.error()
            continue
        values.append(message.value())
    if values:
        consumer.commit(asynchronous=False)
    consumer.close()
    return values, error


def acl(resource_type, name, pattern, operation, permission, principal="User:alice"):
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


DENY = acl(ResourceType.TOPIC, "orders-1", ResourcePatternType.LITERAL, AclOperation.READ,
           AclPermissionType.DENY, principal="User:*")
ANY = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                       AclOperation.ANY, AclPermissionType.ANY)


def setup(_base_url):
    a = admin()
    for future in a.create_topics([NewTopic("orders-1", 1, 1), NewTopic("secret", 1, 1)]).values():
        future.result(TIMEOUT_S)
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), ALICE_PASSWORD.encode())
    for future in a.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT_S)
    # Without users named, one future for every user.
    described = a.describe_user_scram_credentials().result(TIMEOUT_S)
    check(sorted(described) == ["admin", "alice"], f"users described: {sorted(described)}")
    mechanisms = [i.mechanism for i in described["alice"].scram_credential_infos]
    check(mechanisms == [ScramMechanism.SCRAM_SHA_256], f"alice's mechanisms: {mechanisms}")

    error, _ = produce_as_alice(b"refused")
    check(error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          f"alice's produce without an ACL: {error}")

    grants = [
        acl(ResourceType.TOPIC, "orders-", ResourcePatternType.PREFIXED, AclOperation.WRITE,
            AclPermissionType.ALLOW),
        acl(ResourceType.TOPIC, "orders-", ResourcePatternType.PREFIXED, AclOperation.READ,
            AclPermissionType.ALLOW),
        acl(ResourceType.GROUP, "g1", ResourcePatternType.LITERAL, AclOperation.READ,
            AclPermissionType.ALLOW),
    ]
    for future in a.create_acls(grants).values():
        future.result(TIMEOUT_S)
    listed = a.describe_acls(ANY).result(TIMEOUT_S)
    check(sorted(map(str, listed)) == sorted(map(str, grants)), f"ACLs described: {listed}")

    error, _ = produce_as_alice(b"v1")
    check(error is None, f"alice's produce with WRITE on the prefix: {error}")
    topics = sorted(Producer(alice_conf()).list_topics(timeout=TIMEOUT_S).topics)
    check(topics == ["orders-1"], f"alice's Metadata shows only what she may describe: {topics}")
    values, error = read_as_alice()
    check(values == [b"v1"] and error is None, f"alice reads in g1: {values} {error}")

    for future in a.create_acls([DENY]).values():
        future.result(TIMEOUT_S)
    values, error = read_as_alice(group="g1")
    check(not values and error is not None
          and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          f"a DENY for every user beats alice's ALLOW: {values} {error}")

    error, seen = produce_as_alice(b"never", password="wrong")
    check(any(e.code() == KafkaError._AUTHENTICATION for e in seen),
          f"a wrong password fails authentication: {seen}")
    check(error is not None, f"a wrong password delivers nothing: {error}")
    print("confluent_kafka_security: setup checked")


def after_restart(_base_url):
    a = admin()
    listed = a.describe_acls(ANY).result(TIMEOUT_S)
    check(len(listed) == 4, f"ACLs after kill -9: {listed}")
    consumer = Consumer({**conf("admin", ADMIN_PASSWORD, "SCRAM-SHA-512"), "group.id": "g1"})
    committed = consumer.committed([TopicPartition("orders-1", 0)], timeout=TIMEOUT_S)
    consumer.close()
    check(committed[0].offset == 1, f"g1's commit after kill -9: {committed}")

    deleted = a.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "orders-1", ResourcePatternType.LITERAL, "User:*", "*",
        AclOperation.READ, AclPermissionType.DENY)])
    gone = [b for f in deleted.values() for b in f.result(TIMEOUT_S)]
    check([str(b) for b in gone] == [str(DENY)], f"DeleteAcls answers the DENY: {gone}")
    error, _ = produce_as_alice(b"v2")
    check(error is None, f"alice produces after the restart: {error}")
    values, error = read_as_alice(group="g1")
    check(values == [b"v2"] and error is None, f"alice reads on from her commit: {values} {error}")

    for future in a.alter_user_scram_credentials(
            [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)]).values():
        future.result(TIMEOUT_S)
    error, seen = produce_as_alice(b"deleted")
    check(any(e.code() == KafkaError._AUTHENTICATION for e in seen),
          f"a deleted user's login fails: {seen}")
    print("confluent_kafka_security: after-restart checked")


run({"setup": setup, "after-restart": after_restart}[PHASE])
