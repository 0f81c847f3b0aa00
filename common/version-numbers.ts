// Version numbers as tools and services print them, compared as numbers (10.2 after 9.6).

/** The first x.y.z in a version string (`Docker version 27.3.1, build ce12230`, `v3.21.4+g...`). */
export function parseVersion(text: string): [number, number, number] | null {
  const m = /(\d+)\.(\d+)(?:\.(\d+))?/.exec(text)
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : null
}

export function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0)
    if (d) return Math.sign(d)
  }
  return 0
}
