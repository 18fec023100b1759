"""kafka-bridge-client's producer (written for Strimzi's Kafka Bridge)
against tidelog's REST Proxy v2 produce route, read back with the stateless
fetch; and its error for an unknown topic.

The library's producer posts `{"records":[{"key","value"}]}` to
`{url}/topics/{topic}`, with the json or binary embedded format. Its
consumer is bridge_consumer.py.

Usage: bridge_producer.py http://127.0.0.1:PORT
"""

from kafka_bridge_client import KafkaBridgeProducer, Message
from kafka_bridge_client.exceptions import KafkaBridgeTopicNotFoundError

from tidelog_check import BINARY, JSON, b64, check, create_topic, fetch_all, run


def main(base_url):
    producer = KafkaBridgeProducer(base_url, timeout=30)

    topic = "bridge-json"
    create_topic(base_url, topic, 1)
    json_messages = [Message(key=f"k{i}", value={"n": i, "name": f"v{i}"}) for i in range(12)]
    # One batch (`sends`) and one record at a time (`send`).
    check(producer.sends(topic, json_messages[:8]) is True, "sends did not report success")
    for message in json_messages[8:]:
        check(producer.send(topic, message) is True, "send did not report success")
    got = fetch_all(base_url, topic, 0, JSON, len(json_messages), max_records=5)
    for offset, (message, record) in enumerate(zip(json_messages, got)):
        want = (offset, message["key"], message["value"])
        seen = (record["offset"], record["key"], record["value"])
        check(seen == want, f"{topic}: got (offset, key, value) {seen!r}, produced {want!r}")
    print(f"{topic}: {len(json_messages)} json messages read back")

    topic = "bridge-binary"
    create_topic(base_url, topic, 1)
    binary_messages = [Message(key=f"k{i}", value=bytes([0xFE, i]) * 3) for i in range(10)]
    check(
        producer.sends(topic, binary_messages, binary=True) is True,
        "binary sends did not report success",
    )
    got = fetch_all(base_url, topic, 0, BINARY, len(binary_messages), max_records=4)
    for offset, (message, record) in enumerate(zip(binary_messages, got)):
        want = (offset, b64(message["key"].encode()), b64(message["value"]))
        seen = (record["offset"], record["key"], record["value"])
        check(seen == want, f"{topic}: got (offset, key, value) {seen!r}, produced {want!r}")
    print(f"{topic}: {len(binary_messages)} binary messages read back")

    # Topics are not auto-created by default: the library maps the 404 to
    # its own error.
    try:
        producer.send("bridge-no-such-topic", Message(key="k", value="v"))
    except KafkaBridgeTopicNotFoundError:
        pass
    else:
        check(False, "producing to an unknown topic did not raise KafkaBridgeTopicNotFoundError")
    print("bridge_producer: all messages came back")


if __name__ == "__main__":
    run(main)
