// Deterministic random numbers for initialization and synthetic data: mulberry32 (a 32-bit generator with
// period 2^32, plenty for tests), seeded through a string hash so each parameter (or data stream) has its
// own stream, independent of how many others exist; normals by the Box-Muller transform.

/** FNV-1a over the UTF-16 code units of s, mixed with a numeric seed: the seed of one named stream. */
export function streamSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // One splitmix32-style finalizer round so nearby seeds give unrelated streams.
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export class Rng {
  private state: number;
  private spare: number | undefined;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1), 32 bits of resolution (mulberry32). */
  uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }

  /** Standard normal (Box-Muller: each pair of uniforms gives two normals; the second is kept for the next call). */
  normal(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    const u1 = 1 - this.uniform(); // (0, 1]: log stays finite
    const u2 = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.spare = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }
}
