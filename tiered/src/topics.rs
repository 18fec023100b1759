//! Topic metas in the bucket: what a restore needs to recreate the topics
//! (name, partition count, configs), as versioned JSON objects under
//! `topics/{topic}/topic/`. A deletion writes a tombstone version first
//! and then deletes the topic's manifests, objects and snapshots, so a
//! restore never brings back a topic whose deletion was acknowledged, and
//! an interrupted deletion is finished by the retry.

use std::sync::atomic::AtomicU64;

use bytes::Bytes;
use object_store::path::Path;

use crate::error::{Result, TieredError};
use crate::layout;
use crate::manifest::{RemoteTopic, TopicVersion};
use crate::retry::retry;
use crate::tier::{now_ms, unavailable, Created, Inner, RemoteTier, COMMIT_ATTEMPTS};

impl Inner {
    /// The newest version of a topic's meta and the versions listed.
    async fn newest_topic(
        &self,
        topic: &str,
        retries: &AtomicU64,
    ) -> Result<(Option<TopicVersion>, Vec<u64>)> {
        let dir = layout::topic_meta_dir(&self.root, topic);
        let versions = self.versions(&dir, retries).await?;
        for &v in versions.iter().rev() {
            let path = dir.clone().join(layout::version_name(v, ".json"));
            if let Some((t, _)) = self.get_json::<TopicVersion>(&path, retries).await? {
                let t: TopicVersion = t;
                if t.topic.name != topic {
                    return Err(TieredError::corrupt(
                        path.to_string(),
                        format!("holds topic {:?}", t.topic.name),
                    ));
                }
                return Ok((Some(t), versions));
            }
        }
        Ok((None, versions))
    }

    /// Writes `t` as the topic's next version (create-if-absent, again on
    /// top of a newer one after a lost race), then prunes old versions.
    async fn put_topic_version(&self, t: &TopicVersion, retries: &AtomicU64) -> Result<()> {
        let dir = layout::topic_meta_dir(&self.root, &t.topic.name);
        let bytes = Bytes::from(
            serde_json::to_vec_pretty(t)
                .map_err(|e| TieredError::corrupt("topic meta", e.to_string()))?,
        );
        for _ in 0..COMMIT_ATTEMPTS {
            let versions = self.versions(&dir, retries).await?;
            let version = versions.last().map_or(0, |v| v + 1).max(1);
            let path = dir.clone().join(layout::version_name(version, ".json"));
            match self.create(&path, bytes.clone(), retries).await? {
                Created::Exists(there) if there != bytes => continue,
                Created::Written | Created::Exists(_) => {
                    self.prune(&dir, &versions, version).await;
                    return Ok(());
                }
            }
        }
        Err(TieredError::Contended {
            what: format!("meta of topic {}", t.topic.name),
            version: 0,
            attempts: COMMIT_ATTEMPTS,
        })
    }
}

impl Inner {
    /// Deletes everything of a topic but its metas: the manifests first,
    /// oldest version first within each partition (so the newest stays
    /// newest until it goes, and no crash leaves an older version, which
    /// may list objects retention deleted, as the newest), then the
    /// objects and snapshots.
    async fn purge_topic_data(&self, name: &str, retries: &AtomicU64) -> Result<()> {
        let dir = layout::topic_dir(&self.root, name);
        let meta_dir = format!("{}/", layout::topic_meta_dir(&self.root, name));
        let (mut manifests, rest): (Vec<Path>, Vec<Path>) = self
            .list(&dir, retries)
            .await?
            .into_iter()
            .filter(|p| !p.as_ref().starts_with(&meta_dir))
            .partition(|p| p.parts().any(|part| part.as_ref() == "manifest"));
        // Zero-padded versions: the lexical order is the numeric one.
        manifests.sort();
        let deleted = manifests.len() + rest.len();
        for p in manifests.iter().chain(&rest) {
            self.delete(p, retries).await?;
        }
        crate::stats::bump(&self.counters.objects_deleted, rest.len() as u64);
        self.forget_topic(name);
        if deleted > 0 {
            tracing::info!(
                topic = name,
                objects = deleted,
                "topic data deleted from the remote tier"
            );
        }
        Ok(())
    }
}

impl RemoteTier {
    /// Records a topic (on create and alter): a new version of its meta.
    pub async fn put_topic(&self, meta: &RemoteTopic) -> Result<()> {
        layout::check_topic(&meta.name)?;
        if meta.partitions == 0 {
            return Err(TieredError::invalid(format!(
                "topic {:?} with no partitions",
                meta.name
            )));
        }
        let i = &self.inner;
        let retries = &i.counters.upload_retries;
        i.ensure_format(retries).await?;
        // A topic recreated after a deletion that did not finish (the
        // process died after the tombstone): finish it first, so the new
        // incarnation never sees the old one's manifests or records.
        if let (Some(t), _) = i.newest_topic(&meta.name, retries).await? {
            if t.deleted {
                i.purge_topic_data(&meta.name, retries).await?;
            }
        }
        let t = TopicVersion {
            topic: meta.clone(),
            deleted: false,
        };
        i.put_topic_version(&t, retries).await?;
        tracing::info!(topic = %meta.name, partitions = meta.partitions, "topic meta written to the remote tier");
        Ok(())
    }

    /// The newest version of each topic in the bucket, deleted ones left
    /// out, by name.
    pub async fn topics(&self) -> Result<Vec<RemoteTopic>> {
        let i = &self.inner;
        let retries = &i.counters.read_retries;
        i.ensure_format(retries).await?;
        let dir = layout::topics_dir(&i.root);
        // One level only: the topic directories, not every object in them.
        let listed = retry(&i.policy, "list topics", retries, || {
            i.store.list_with_delimiter(Some(&dir))
        })
        .await
        .map_err(unavailable("list topics"))?;
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            if layout::check_topic(&name).is_err() {
                tracing::warn!(name, "not a topic directory; skipped");
                continue;
            }
            match i.newest_topic(&name, retries).await? {
                (Some(t), _) if !t.deleted => out.push(t.topic),
                (Some(_), _) => {}
                (None, _) => {
                    tracing::warn!(topic = name, "remote data without a topic meta; skipped")
                }
            }
        }
        Ok(out)
    }

    /// Deletes a topic's remote data: a tombstone version first, then its
    /// manifests (so no manifest is left naming a deleted object), then
    /// its objects and snapshots. Idempotent; a retry finishes the job, and
    /// so does a `put_topic` of the same name.
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        layout::check_topic(name)?;
        let i = &self.inner;
        let retries = &i.counters.upload_retries;
        i.ensure_format(retries).await?;
        let (newest, _) = i.newest_topic(name, retries).await?;
        if !newest.as_ref().is_some_and(|t| t.deleted) {
            let mut topic = newest.map(|t| t.topic).unwrap_or_else(|| RemoteTopic {
                name: name.to_string(),
                partitions: 0,
                configs: Default::default(),
                updated_ms: 0,
            });
            topic.updated_ms = now_ms();
            i.put_topic_version(
                &TopicVersion {
                    topic,
                    deleted: true,
                },
                retries,
            )
            .await?;
        }
        i.purge_topic_data(name, retries).await?;
        Ok(())
    }
}
