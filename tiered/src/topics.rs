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
use crate::tier::{now_ms, Created, Inner, RemoteTier, COMMIT_ATTEMPTS};

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
        let mut names: Vec<String> = i
            .list(&dir, retries)
            .await?
            .iter()
            .filter_map(|p| {
                p.prefix_match(&dir)?
                    .next()
                    .map(|part| part.as_ref().to_string())
            })
            .collect();
        names.sort();
        names.dedup();
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
    /// its objects and snapshots. Idempotent; a retry finishes the job.
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
        let dir = layout::topic_dir(&i.root, name);
        let meta_dir = format!("{}/", layout::topic_meta_dir(&i.root, name));
        let (manifests, rest): (Vec<Path>, Vec<Path>) = i
            .list(&dir, retries)
            .await?
            .into_iter()
            .filter(|p| !p.as_ref().starts_with(&meta_dir))
            .partition(|p| p.parts().any(|part| part.as_ref() == "manifest"));
        let deleted = manifests.len() + rest.len();
        for p in manifests.iter().chain(&rest) {
            i.delete(p, retries).await?;
        }
        crate::stats::bump(&i.counters.objects_deleted, rest.len() as u64);
        i.forget_topic(name);
        tracing::info!(
            topic = name,
            objects = deleted,
            "topic deleted from the remote tier"
        );
        Ok(())
    }
}
