//! reshape_and_cache: token key/value rows written into the paged cache at their slots.

use super::*;

pub(super) fn reshape_and_cache_shapes() -> Vec<BTreeMap<String, Value>> {
    [
        ([5, 2, 64], 16),
        ([37, 3, 32], 16),
        ([16, 1, 128], 16),
        ([9, 3, 6], 4),
    ]
    .iter()
    .map(|(s, bs)| params(&[("shape", ints(s)), ("block_size", Value::Int(*bs))]))
    .collect()
}

/// The caches are copied whole; token t's key/value rows go to slot s = slot_mapping[t]
/// (block s / bs, offset s % bs, i.e. row s of the [NB·bs, H·D] view); s < 0 is skipped.
pub(super) fn reshape_and_cache(
    env: &Env,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, String> {
    let (t, h, d, bs) = (
        int(env, "T")?,
        int(env, "H")?,
        int(env, "D")?,
        int(env, "bs")?,
    );
    let hd = h * d;
    let key = input(inputs, "key")?;
    let value = input(inputs, "value")?;
    let mut kc = input(inputs, "key_cache")?.clone();
    let mut vc = input(inputs, "value_cache")?.clone();
    let slots = input(inputs, "slot_mapping")?.i64s();
    let rows = kc.elements() / hd.max(1);
    for (tok, s) in slots.iter().enumerate().take(t) {
        if *s < 0 {
            continue;
        }
        let s = *s as usize;
        let (blk, off) = (s / bs, s % bs);
        let row = blk * bs + off;
        if row >= rows {
            return Err(format!(
                "slot {s} of token {tok} is outside the cache ({rows} slots)"
            ));
        }
        let (src, dst) = (tok * hd * 2, row * hd * 2);
        kc.bytes[dst..dst + hd * 2].copy_from_slice(&key.bytes[src..src + hd * 2]);
        vc.bytes[dst..dst + hd * 2].copy_from_slice(&value.bytes[src..src + hd * 2]);
    }
    kc.name = "key_cache_out".into();
    vc.name = "value_cache_out".into();
    Ok(vec![kc, vc])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bf16s, env_of, suite};
    use super::*;

    #[test]
    fn reshape_and_cache_writes_mapped_slots_and_keeps_the_rest() {
        let s = suite();
        let p = s.problem("reshape_and_cache").unwrap();
        let env = env_of(
            p,
            params(&[("shape", ints(&[6, 2, 8])), ("block_size", Value::Int(4))]),
        );
        let (t, hd, nb, bs) = (6, 16, 2, 4);
        let mut rng = Rng::new(7);
        let key = bf16s("key", vec![t, 2, 8], &rng.normal_in("bf16", t * hd, 1.0));
        let value = bf16s("value", vec![t, 2, 8], &rng.normal_in("bf16", t * hd, 1.0));
        let kc0 = bf16s(
            "key_cache",
            vec![nb, bs, 2, 8],
            &rng.normal_in("bf16", nb * bs * hd, 1.0),
        );
        let vc0 = bf16s(
            "value_cache",
            vec![nb, bs, 2, 8],
            &rng.normal_in("bf16", nb * bs * hd, 1.0),
        );
        // a permutation with one skipped token; slots 1 and 6 stay untouched
        let slots: Vec<i64> = vec![7, 0, -1, 5, 2, 3];
        let sm = HostTensor::from_i64("slot_mapping", "int64", vec![t], &slots);
        let out = reshape_and_cache(
            &env,
            &[key.clone(), value.clone(), kc0.clone(), vc0.clone(), sm],
        )
        .unwrap();
        assert_eq!(out[0].name, "key_cache_out");
        let (kc, vc) = (out[0].f32s(), out[1].f32s());
        let (k, v, k0, v0) = (key.f32s(), value.f32s(), kc0.f32s(), vc0.f32s());
        let mut written = [false; 8];
        for (tok, s) in slots.iter().enumerate() {
            if *s < 0 {
                continue;
            }
            let s = *s as usize;
            written[s] = true;
            assert_eq!(&kc[s * hd..(s + 1) * hd], &k[tok * hd..(tok + 1) * hd]);
            assert_eq!(&vc[s * hd..(s + 1) * hd], &v[tok * hd..(tok + 1) * hd]);
        }
        for s in 0..8 {
            if !written[s] {
                assert_eq!(
                    &kc[s * hd..(s + 1) * hd],
                    &k0[s * hd..(s + 1) * hd],
                    "slot {s}"
                );
                assert_eq!(
                    &vc[s * hd..(s + 1) * hd],
                    &v0[s * hd..(s + 1) * hd],
                    "slot {s}"
                );
            }
        }
        // the skipped token's key appears nowhere
        let skipped = &k[2 * hd..3 * hd];
        assert!((0..8).all(|s| &kc[s * hd..(s + 1) * hd] != skipped));
    }
}
