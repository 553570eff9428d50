//! The decoder limits of the targets that decode arbitrary Jelly bytes: small tables and
//! frames, so that a fuzzer's input reaches every limit quickly.

use jelly::DecoderOptions;

/// Small limits; `check_features` as the target wants it.
pub fn small_limits(check_features: bool) -> DecoderOptions {
    DecoderOptions {
        max_name_table_size: 512,
        max_prefix_table_size: 64,
        max_datatype_table_size: 32,
        max_nesting: 24,
        max_frame_bytes: 1 << 20,
        check_features,
        max_frames_before_options: jelly::DEFAULT_MAX_FRAMES_BEFORE_OPTIONS,
    }
}
