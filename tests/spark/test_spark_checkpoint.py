"""Reading the streaming checkpoint's offsets/commits logs through Spark's Hadoop file system and through
pyarrow.fs, for a checkpoint Spark wrote at a file: URI whose path is not a plain directory name."""
import os

import pytest

pytestmark = pytest.mark.spark


def test_checkpoint_logs_read_alike_through_hadoop_and_pyarrow(spark, services, unique, tmp_path, monkeypatch):
    from zkconsumer.spark import last_committed_end, read_checkpoint_offsets
    from zkconsumer.spark.checkpoint import checkpoint_files
    topic, group = services.create_topic(unique("ck"), 2), unique("g")
    services.produce(topic, 20)
    # spaces and a literal "%20": Hadoop's Path takes a URI's path literally (no %-decoding), so must we
    base = tmp_path / "my ckpt%20dir" / "query one"
    uri = "file://" + str(base)
    seen = {}

    def each(df, batch_id):
        rows = df.select("partition", "offset").collect()
        ends = {}
        for r in rows:
            ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
        seen[batch_id] = ends
        # inside foreachBatch (driver, SparkContext active) the default is Spark's own Hadoop file system
        assert type(checkpoint_files(uri)).__name__ == "HadoopCheckpointFiles"

    opts = {"zookeeper.connect": services.zookeeper_connect, "group.id": group, "subscribe": topic,
            "kafka.bootstrap.servers": services.bootstrap_servers, "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "8"}
    q = (spark.readStream.format("zkconsumer").options(**opts).load().writeStream.foreachBatch(each)
         .option("checkpointLocation", uri).trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None, q.exception()
    assert os.path.isdir(base / "offsets") and os.path.isdir(base / "commits")   # written at the literal path
    data_batches = {b: e for b, e in seen.items() if e}
    assert len(data_batches) >= 3
    names = sorted(os.listdir(base / "offsets"))
    assert any(n.endswith(".crc") for n in names), names                          # Hadoop's checksum files
    (base / "commits" / "999.tmp").write_text("not a batch")                      # a stray temporary file
    monkeypatch.chdir(tmp_path)
    # a relative path: pyarrow resolves it against this process's working directory (Hadoop against the JVM's,
    # which a chdir here does not move)
    cases = [(fs, loc) for fs in ("hadoop", "pyarrow") for loc in (uri, "file:" + str(base), str(base))]
    cases.append(("pyarrow", os.path.join("my ckpt%20dir", "query one")))
    for fs, loc in cases:
        last = last_committed_end(loc, filesystem=fs)
        assert sum(last.values()) == 20 and {t for t, _ in last} == {topic}, (fs, loc, last)
        for b, ends in data_batches.items():
            got = {p: o for (_, p), o in read_checkpoint_offsets(loc, b, filesystem=fs).items() if p in ends}
            assert got == ends, (fs, loc, b, got, ends)
    # no checkpoint yet: nothing committed, through both
    for fs in ("hadoop", "pyarrow"):
        assert last_committed_end("file://" + str(tmp_path / "none yet"), filesystem=fs) == {}
    with pytest.raises(ValueError, match="filesystem"):
        checkpoint_files(uri, "ftp")
