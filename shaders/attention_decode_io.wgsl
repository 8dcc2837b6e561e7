// attention_decode_io: what the one-token attention kernels (attention_decode.wgsl and
// attention_decode_wide.wgsl) share: their bindings (attention.wgsl's, and with ROPE the cos/sin
// table, with QUANT the output's integers), the cache's reads, RoPE of a 4-dim group, the
// partials' layout and, with COMBINE, the merge of a head group's key splits. Composed before the
// kernel, after its constants (HD, GQ, G, WGT: the kernel's threads, KV16, ROPE, VCACHED,
// COMBINE, QUANT, GS, MAX_SPLITS, TICKETS, MG and MGROUPS: the merge's split groups); the kernel
// declares `Q` (G x HD / 4 vec4s of workgroup memory, free when its merge runs).
// With `COMBINE` (and ROPE) the key splits are merged here, not by a combine dispatch: each
// workgroup writes its partial, then counts itself done on its head group's ticket (an atomic
// counter after the partials, from `TICKETS` on), and the group's last workgroup to finish (the
// last-block pattern of CUDA's threadFenceReduction sample) merges them (`merge`) and resets
// the ticket. A storage barrier (device scope in SPIR-V) orders a workgroup's partials before
// its ticket, another the merging workgroup's reads after it. (WGSL promises storageBarrier
// only within a workgroup; naga's SPIR-V makes it device scope, which this relies on:
// attention::fuses_combine keeps it to Vulkan.) The partials are laid out per head group
// ([group][split] blocks of G heads, each block whole 128-byte lines, `GS` floats), so that
// no other workgroup's reads can have left a line of them in the merging one's cache: only a
// group's merge reads its blocks. With `QUANT` it
// also writes the G heads' output rows as quantize_half.wgsl's integers (XQW,
// XSW; head dims a multiple of 16), as the combine's QUANT does.
// Bindings as attention.wgsl's. Grid (GQ / G, n_kv, splits).
@bind var<uniform> p: Attn;
@bind var<uniform> st: Step;
@bind var<storage, read> qkv: array<f32>;
//@if ROPE
@bind var<storage, read_write> kc: array<KvQuad>;
@bind var<storage, read_write> vc: array<KvQuad>;
//@end
//@if !ROPE
@bind var<storage, read> kc: array<KvQuad>;
@bind var<storage, read> vc: array<KvQuad>;
//@end
@bind var<storage, read_write> o: array<f32>;
//@if !COMBINE
@bind var<storage, read_write> partials: array<f32>;
//@end
//@if COMBINE
struct Partials { p: array<f32, TICKETS>, tickets: array<atomic<u32>> };
@bind var<storage, read_write> partials: Partials;
//@end
//@if ROPE
@bind var<storage, read> cs: array<f32>;
//@end
//@if QUANT
@bind var<storage, read_write> XQW: array<vec4<u32>>;
@bind var<storage, read_write> XSW: array<vec2<f32>>;
//@end

const NEG: f32 = -3.0e38; // a masked score
// Value dims in 4-dim groups: NDG groups per head.
const NDG: u32 = HD / 4u;
//@if COMBINE
var<workgroup> TICKET: u32; // the head group's count of finished splits before this one
//@end

// Key-cache elements 4i .. 4i + 4.
fn key4(i: u32) -> vec4<f32> {
//@if KV16
  let w = kc[i];
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
//@end
//@if !KV16
  return kc[i];
//@end
}

// Value-cache elements 4i .. 4i + 4.
fn value4(i: u32) -> vec4<f32> {
//@if KV16
  let w = vc[i];
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
//@end
//@if !KV16
  return vc[i];
//@end
}

// Partial results' element i := x (see `partial`).
fn put(i: u32, x: f32) {
//@if COMBINE
  partials.p[i] = x;
//@end
//@if !COMBINE
  partials[i] = x;
//@end
}

// Where head g of a workgroup's G (from h0 on, head group `group`) keeps its partial of split
// `split` (HD dims, max, sum): attention_combine.wgsl's layout, or with COMBINE the head
// group's blocks.
fn partial(group: u32, split: u32, g: u32) -> u32 {
//@if COMBINE
  return (group * MAX_SPLITS + split) * GS + g * (HD + 2u);
//@end
//@if !COMBINE
  return (split * p.n_heads + group * G + g) * (HD + 2u);
//@end
}

// Dims 4 d .. 4 d + 4 of the sums `a` of head g (of the workgroup's G from h0 on, head group
// `group`) over key split `split` of ns: the output (a / l, l the sum of the weights) where the
// keys are not split, else the split's partial.
fn put_dims(group: u32, split: u32, ns: u32, h0: u32, g: u32, d: u32, a: vec4<f32>, l: f32) {
  let base = partial(group, split, g);
  for (var e = 0u; e < 4u; e++) {
    if (ns == 1u) {
      o[(h0 + g) * HD + 4u * d + e] = a[e] / l;
    } else {
      put(base + 4u * d + e, a[e]);
    }
  }
}

// Head g's max m and sum of weights l over split `split` (of more than one), beside its dims.
fn put_stats(group: u32, split: u32, g: u32, m: f32, l: f32) {
  let base = partial(group, split, g);
  put(base + HD, m);
  put(base + HD + 1u, l);
}

//@if ROPE
var<workgroup> KOWN: array<vec4<f32>, HD / 4u>; // the token's own key, rotated (KV16: rounded)

// KV head kvh's key of the token, rotated (with KV16 rounded to f16, `as_cached`) into KOWN by
// all threads at once (j this one): it is
// not in the cache yet, and its scoring threads would otherwise wait on HD / 4 dependent loads
// of qkv and the table while the workgroup waits on them.
fn rotate_own(kvh: u32, j: u32) {
  let knew = p.n_heads * HD + kvh * HD;
  for (var i = j; i < HD / 4u; i += WGT) {
    KOWN[i] = as_cached(rope4(qkv4(knew + 4u * i), 4u * i, st.pos0));
  }
}

// KV head kvh's key of the token (KOWN) and value (from qkv) into its cache row, by all threads
// (j this one; with VCACHED the value is there already).
fn store_own(kvh: u32, j: u32) {
  for (var i = j; i < HD / 4u; i += WGT) {
    let c = (st.pos0 * p.n_kv * HD + kvh * HD) / 4u + i;
    let k = KOWN[i];
//@if KV16
    kc[c] = vec2<u32>(pack2x16float(k.xy), pack2x16float(k.zw));
//@end
//@if !KV16
    kc[c] = k;
//@end
//@if !VCACHED
    let v = qkv4(vnew(kvh) + 4u * i);
//@if KV16
    vc[c] = vec2<u32>(pack2x16float(v.xy), pack2x16float(v.zw));
//@end
//@if !KV16
    vc[c] = v;
//@end
//@end
  }
}
//@end

// x as the cache holds it: with KV16 rounded to f16, so that the token's own key and value
// count as they will once read back from the cache (as the reference's and llama.cpp's do, and
// as with VCACHED, where the value projection wrote the rounded value there).
fn as_cached(x: vec4<f32>) -> vec4<f32> {
//@if KV16
  return vec4<f32>(unpack2x16float(pack2x16float(x.xy)), unpack2x16float(pack2x16float(x.zw)));
//@end
//@if !KV16
  return x;
//@end
}

// qkv[o] .. qkv[o + 4].
fn qkv4(o: u32) -> vec4<f32> {
  return vec4<f32>(qkv[o], qkv[o + 1u], qkv[o + 2u], qkv[o + 3u]);
}

// Dims d .. d + 4 (d a multiple of 4) of a head at position pos, RoPE applied as rope_kv.wgsl
// does: dims (d, d + 1) are pair d / 2, (d + 2, d + 3) pair d / 2 + 1; pairs from p.rot on pass.
fn rope4(x: vec4<f32>, d: u32, pos: u32) -> vec4<f32> {
//@if ROPE
  var y = x;
  let j = d / 2u;
  if (j < p.rot) {
    let t = 2u * (pos * p.rot + j);
    y = vec4<f32>(x.x * cs[t] - x.y * cs[t + 1u], x.x * cs[t + 1u] + x.y * cs[t], y.z, y.w);
  }
  if (j + 1u < p.rot) {
    let t = 2u * (pos * p.rot + j + 1u);
    y = vec4<f32>(y.x, y.y, x.z * cs[t] - x.w * cs[t + 1u], x.z * cs[t + 1u] + x.w * cs[t]);
  }
  return y;
//@end
//@if !ROPE
  return x;
//@end
}

// Where KV head kvh's value of the token starts in qkv.
fn vnew(kvh: u32) -> u32 {
  return (p.n_heads + p.n_kv + kvh) * HD;
}

// Dims 4 dg .. 4 dg + 4 of KV head kvh's value of the token (ROPE): from qkv, or with VCACHED from
// the token's cache row.
fn own_value(kvh: u32, dg: u32) -> vec4<f32> {
//@if VCACHED
  return value4((st.pos0 * p.n_kv * HD + kvh * HD) / 4u + dg);
//@end
//@if !VCACHED
  return as_cached(qkv4(vnew(kvh) + 4u * dg));
//@end
}

//@if COMBINE
// The merge's split groups (composed: MG, 1 without MGROUPS): MG groups of G x NDG threads each
// take every MG-th run of 8 splits, and their results are combined in workgroup memory once.
//@if MGROUPS
var<workgroup> MACC: array<vec4<f32>, MG * G * NDG>; // a split group's weighted dims
var<workgroup> MMZ: array<vec2<f32>, MG * G * NDG>; // its max and sum of weights
//@end

// After this workgroup's partials of heads h0 .. h0 + G (by all WGT threads, j this one's): if it
// is the last of the ns splits of head group `group` to finish, the merge of their partials
// into o, attention_combine.wgsl's maths with its latency cut: thread i of split group r takes
// dims 4 (i % NDG) .. of head i / NDG and loads the max, sum and dims of splits 8 r .., 8 (r +
// MG) .., ..., 8 splits at a time, rescaling once per 8 (their weights then independent, not a
// chain), then the MG groups' results are added; with QUANT four threads write each half's
// integers. 8 splits at a time make the merge's rescales independent instead of a chain; split
// groups (attention_decode_wide.wgsl's: 4 at head dim 128 with 2 heads a workgroup) make the 32
// splits after 4096 keys one round of loads, not four.
fn merge(group: u32, h0: u32, j: u32, ns: u32) {
  // (Release: this workgroup's partials before its ticket.)
  storageBarrier();
  if (j == 0u) { TICKET = atomicAdd(&partials.tickets[group], 1u); }
  if (workgroupUniformLoad(&TICKET) + 1u < ns) { return; }
  // (Acquire: the other workgroups' partials after the ticket. A release barrier on the
  // merging workgroup's path costs nothing measurable.)
  storageBarrier();
  if (j == 0u) { atomicStore(&partials.tickets[group], 0u); }
//@if MGROUPS
  for (var i = j; i < MG * G * NDG; i += WGT) {
    let n = i % (G * NDG);
    let s1 = 8u * (i / (G * NDG)); // this split group's first split
//@end
//@if !MGROUPS
  for (var i = j; i < G * NDG; i += WGT) {
    let n = i;
    let s1 = 0u;
//@end
    let b0 = partial(group, 0u, n / NDG);
    let d0 = b0 + 4u * (n % NDG);
    var mx = NEG;
    var z = 0.0;
    var acc = vec4<f32>();
    for (var s0 = s1; s0 < ns; s0 += 8u * MG) {
      var ml = array<vec2<f32>, 8>(); // split s0 + u's max and sum
      var a = array<vec4<f32>, 8>();
      for (var u = 0u; u < 8u; u++) {
        let at = min(s0 + u, ns - 1u) * GS;
        ml[u] = vec2<f32>(partials.p[b0 + at + HD], partials.p[b0 + at + HD + 1u]);
        a[u] = vec4<f32>(partials.p[d0 + at], partials.p[d0 + at + 1u], partials.p[d0 + at + 2u], partials.p[d0 + at + 3u]);
      }
      // The 8 splits' max, one rescale, then their weights (independent, not a chain of
      // rescales). A split without keys has sum 0 and adds nothing.
      var m = mx;
      for (var u = 0u; u < 8u; u++) {
        if (s0 + u < ns && ml[u].y > 0.0) { m = max(m, ml[u].x); }
      }
      let c = exp(mx - m);
      acc *= c;
      z *= c;
      mx = m;
      for (var u = 0u; u < 8u; u++) {
        if (s0 + u < ns && ml[u].y > 0.0) {
          let e = exp(ml[u].x - m);
          acc += a[u] * e;
          z += ml[u].y * e;
        }
      }
    }
//@if MGROUPS
    MACC[i] = acc;
    MMZ[i] = vec2<f32>(mx, z);
  }
  workgroupBarrier();
  // The split groups' results (a group without splits, or whose splits had no keys, has sum 0).
  for (var i = j; i < G * NDG; i += WGT) {
    var m = NEG;
    for (var r = 0u; r < MG; r++) {
      let e = MMZ[r * G * NDG + i];
      if (e.y > 0.0) { m = max(m, e.x); }
    }
    var acc = vec4<f32>();
    var z = 0.0;
    for (var r = 0u; r < MG; r++) {
      let e = MMZ[r * G * NDG + i];
      if (e.y > 0.0) {
        let c = exp(e.x - m);
        acc += MACC[r * G * NDG + i] * c;
        z += e.y * c;
      }
    }
//@end
    let y = acc / z;
    for (var e = 0u; e < 4u; e++) { o[h0 * HD + 4u * i + e] = y[e]; }
//@if QUANT
    Q[i] = y;
//@end
  }
//@if QUANT
  // The heads' rows (in Q, whose queries are done with) as integers: thread i writes vec4 i's
  // digits, its half's scale from all four (quantize_half's maths, four threads a half).
  workgroupBarrier();
  for (var i = j; i < G * NDG; i += WGT) {
    let k = i / 4u;
    let s = half_scale(array<vec4<f32>, 4>(Q[4u * k], Q[4u * k + 1u], Q[4u * k + 2u], Q[4u * k + 3u]));
    let q = half_digits(Q[i], s.y);
    let at = 3u * (h0 * HD / 16u + k);
    XQW[at][i % 4u] = q.x;
    XQW[at + 1u][i % 4u] = q.y;
    XQW[at + 2u][i % 4u] = q.z;
    if (i % 4u == 0u) { XSW[h0 * HD / 16u + k] = vec2<f32>(s.x, s.z); }
  }
//@end
}
//@end

