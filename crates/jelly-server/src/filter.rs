//! PLACEHOLDER for task C's subscription filters (same public API); `build` gives no
//! filter. The coordinator replaces this file with task C's `filter.rs`.

use std::sync::Arc;

use crate::item::Item;

/// Filter query parameters.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct FilterParams {
    pub source: Option<String>,
    pub prefix: Option<String>,
    pub pattern: Option<String>,
    pub ask: Option<String>,
}

impl FilterParams {
    /// The filter (placeholder: none).
    pub fn build(&self) -> Result<Option<Arc<ItemFilter>>, FilterError> {
        Ok(None)
    }

    /// The parameters from gRPC metadata (placeholder: none).
    pub fn from_grpc_metadata(
        _md: &tonic::metadata::MetadataMap,
    ) -> Result<FilterParams, FilterError> {
        Ok(FilterParams::default())
    }
}

/// A subscription filter.
#[derive(Debug)]
pub struct ItemFilter {
    key: String,
}

impl ItemFilter {
    /// Canonical key: equal filters have equal keys.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether the item passes.
    pub fn accepts(&self, _item: &Item) -> Result<bool, FilterError> {
        Ok(true)
    }
}

/// A filter that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("{0}")]
    Invalid(String),
}
