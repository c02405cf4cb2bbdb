//! `[workers.NAME] image = true`, or `[workers.NAME.image]` with limits: the image capability
//! (docs/configuration.md#images, docs/limits.md#images).

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use edgegate_runtime::ByteSize;

/// What a worker's image work may use.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImageConfig {
    /// The most pixels (width × height) of an input picture or an output. A picture whose
    /// header declares more is refused before it is decoded. Default 40000000.
    pub max_pixels: u64,
    /// The largest encoded output. Default 16MiB.
    pub max_output: ByteSize,
    /// The most scans an input picture may have (a progressive JPEG is coded in several); more
    /// is refused before it is decoded. Default 100.
    pub max_scans: u32,
    /// Pixel memory the worker's transforms may hold at once, across its requests. Default
    /// 256MiB.
    pub memory: ByteSize,
}

impl Default for ImageConfig {
    fn default() -> Self {
        let grant = edgegate_runtime::ImageGrant::default();
        Self {
            max_pixels: grant.limits.max_pixels,
            max_output: ByteSize(grant.limits.max_output),
            max_scans: grant.limits.max_scans,
            memory: ByteSize(grant.memory),
        }
    }
}

impl From<&ImageConfig> for edgegate_runtime::ImageGrant {
    fn from(c: &ImageConfig) -> Self {
        Self {
            limits: edgegate_image::Limits {
                max_pixels: c.max_pixels,
                max_output: c.max_output.bytes(),
                max_scans: c.max_scans,
            },
            memory: c.memory.bytes(),
        }
    }
}

/// `image = true` (the defaults), `image = false` (none), or a table of limits.
pub(crate) fn grant<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ImageConfig>, D::Error> {
    struct Grant;

    impl<'de> Visitor<'de> for Grant {
        type Value = Option<ImageConfig>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("true, false, or a table with max_pixels, max_output, max_scans and memory")
        }

        fn visit_bool<E: de::Error>(self, granted: bool) -> Result<Self::Value, E> {
            Ok(granted.then(ImageConfig::default))
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            ImageConfig::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }

    d.deserialize_any(Grant)
}
