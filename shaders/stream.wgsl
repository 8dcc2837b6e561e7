// stream: reads a buffer once, 16 bytes per load and four loads in flight per thread, side by
// side across the threads: the best case of a weight kernel's reads, timed by the bench as the
// device's measured read bandwidth (bench::read_bandwidth).
@bind var<storage, read> S: array<vec4<u32>>;
@bind var<storage, read_write> O: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u, @builtin(num_workgroups) n: vec3u) {
  let threads = n.x * 256u;
  let len = arrayLength(&S);
  var acc = vec4<u32>();
  for (var i = g.x; i < len; i += 4u * threads) {
    let a = S[i];
    let b = S[min(i + threads, len - 1u)];
    let c = S[min(i + 2u * threads, len - 1u)];
    let d = S[min(i + 3u * threads, len - 1u)];
    acc ^= a ^ b ^ c ^ d;
  }
  // Never true for the bench's zeroed buffer; keeps the loads.
  if (acc.x == 0x9e3779b9u) { O[0] = acc.y; }
}
