//! Values as stored: postcard bytes tagged with the version of the type that wrote them.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Versioned;
use crate::store::StoreError;

/// `value` encoded by version `version` of its type.
pub(super) fn encode<T: Serialize>(value: &T, version: u32) -> Result<Versioned, StoreError> {
    let bytes = postcard::to_allocvec(value)
        .map_err(|error| StoreError::Invalid(format!("encoding: {error}")))?;
    Ok(Versioned { version, bytes })
}

/// `stored` decoded by version `current` of its type: as it is when `current` wrote it,
/// through `upcast` when an older version did. One a newer version wrote cannot be read here
/// (a node running an older build): an error, never a guess.
pub(super) fn decode<T: DeserializeOwned>(
    stored: &Versioned,
    current: u32,
    upcast: impl FnOnce(u32, &[u8]) -> Result<T, String>,
) -> Result<T, StoreError> {
    if stored.version == current {
        return postcard::from_bytes(&stored.bytes)
            .map_err(|error| StoreError::Invalid(format!("decoding version {current}: {error}")));
    }
    if stored.version > current {
        return Err(StoreError::Invalid(format!(
            "written by version {} of the type, this node runs version {current}",
            stored.version
        )));
    }
    upcast(stored.version, &stored.bytes).map_err(|error| {
        StoreError::Invalid(format!("upcasting version {}: {error}", stored.version))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_version_decodes_an_older_one_upcasts_a_newer_one_is_refused() {
        let v2 = encode(&(7u32, true), 2).expect("encodes");
        let same: (u32, bool) = decode(&v2, 2, |_, _| Err("unused".into())).expect("decodes");
        assert_eq!(same, (7, true));
        let v1 = encode(&7u32, 1).expect("encodes");
        let upcast: (u32, bool) = decode(&v1, 2, |version, bytes| {
            assert_eq!(version, 1);
            let old: u32 = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
            Ok((old, false))
        })
        .expect("upcasts");
        assert_eq!(upcast, (7, false));
        let refused = decode::<u32>(&v2, 1, |_, _| Ok(0));
        assert!(
            matches!(refused, Err(StoreError::Invalid(_))),
            "{refused:?}"
        );
        let no_upcast = decode::<(u32, bool)>(&v1, 2, |v, _| Err(format!("no upcast from {v}")));
        assert!(matches!(no_upcast, Err(StoreError::Invalid(_))));
    }
}
