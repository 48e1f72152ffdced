-- perfonto generated metrics query (duckdb); generation alpha, catalog hash 0e9c7bf0d5ac8b7b, 5 metrics.
-- Do not edit: regenerate with `perfonto codegen --target sql`.
WITH src AS (
  SELECT
    host,
    chip,
    timestamp_ns AS ts,
    CAST(ROUND_EVEN(
      CAST(timestamp_ns - MIN(timestamp_ns) OVER (PARTITION BY host, chip) AS DOUBLE) / 1000000.0e0,
      0
    ) AS BIGINT) AS g,
    "mem.rd"[1] AS r0_0,
    "mem.rd"[2] AS r0_1,
    "mem.wr"[1] AS r1_0,
    "mem.wr"[2] AS r1_1,
    "eng.busy" AS r2_0,
    "eng.cycles" AS r3_0,
    "eng.level" AS r4_0
  FROM READ_PARQUET('counters.parquet')
), joined AS (
  SELECT
    k.host,
    k.chip,
    k.g,
    s.ts AS ts0,
    s.r0_0,
    s.r0_1,
    s.r1_0,
    s.r1_1,
    s.r2_0,
    s.r3_0,
    s.r4_0,
    LAST_VALUE(s.ts IGNORE NULLS) OVER (
      PARTITION BY k.host, k.chip
      ORDER BY k.g
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS lt,
    LAST_VALUE(CASE WHEN NOT s.ts IS NULL THEN k.g END IGNORE NULLS) OVER (
      PARTITION BY k.host, k.chip
      ORDER BY k.g
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS lg,
    FIRST_VALUE(s.ts IGNORE NULLS) OVER (
      PARTITION BY k.host, k.chip
      ORDER BY k.g
      ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING
    ) AS nt,
    FIRST_VALUE(CASE WHEN NOT s.ts IS NULL THEN k.g END IGNORE NULLS) OVER (
      PARTITION BY k.host, k.chip
      ORDER BY k.g
      ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING
    ) AS ng
  FROM (
    SELECT
      ch.host,
      ch.chip,
      gr.g
    FROM (
      SELECT DISTINCT
        host,
        chip
      FROM src
    ) AS ch
    CROSS JOIN RANGE(0, (
      SELECT
        MAX(g) + 1
      FROM src
    )) AS gr(g)
  ) AS k
  LEFT JOIN src AS s
    ON s.host = k.host AND s.chip = k.chip AND s.g = k.g
), filled AS (
  SELECT
    host,
    chip,
    g,
    CASE
      WHEN NOT ts0 IS NULL
      THEN ts0
      WHEN nt IS NULL
      THEN lt
      ELSE CAST(ROUND_EVEN(
        CAST(nt - lt AS DOUBLE) / CAST(ng - lg AS DOUBLE) * CAST(g - lg AS DOUBLE) + CAST(lt AS DOUBLE),
        0
      ) AS BIGINT)
    END AS ts,
    r0_0,
    r0_1,
    r1_0,
    r1_1,
    r2_0,
    r3_0,
    r4_0
  FROM joined
), lagged AS (
  SELECT
    host,
    chip,
    g,
    ts,
    r0_0,
    r0_1,
    r1_0,
    r1_1,
    r2_0,
    r3_0,
    r4_0,
    LAG(ts) OVER (PARTITION BY host, chip ORDER BY g) AS p_ts,
    LAG(r0_0) OVER (PARTITION BY host, chip ORDER BY g) AS p0_0,
    LAG(r0_1) OVER (PARTITION BY host, chip ORDER BY g) AS p0_1,
    LAG(r1_0) OVER (PARTITION BY host, chip ORDER BY g) AS p1_0,
    LAG(r1_1) OVER (PARTITION BY host, chip ORDER BY g) AS p1_1,
    LAG(r2_0) OVER (PARTITION BY host, chip ORDER BY g) AS p2_0,
    LAG(r3_0) OVER (PARTITION BY host, chip ORDER BY g) AS p3_0,
    LAG(r4_0) OVER (PARTITION BY host, chip ORDER BY g) AS p4_0
  FROM filled
), deltas AS (
  SELECT
    *,
    (
      (
        CAST(r2_0 % 4294967296 AS BIGINT) - CAST(p2_0 % 4294967296 AS BIGINT)
      ) % 4294967296 + 4294967296
    ) % 4294967296 AS d2_0,
    (
      (
        CAST(r3_0 % 4294967296 AS BIGINT) - CAST(p3_0 % 4294967296 AS BIGINT)
      ) % 4294967296 + 4294967296
    ) % 4294967296 AS d3_0,
    (
      (
        CAST(r0_0 % 281474976710656 AS BIGINT) - CAST(p0_0 % 281474976710656 AS BIGINT)
      ) % 281474976710656 + 281474976710656
    ) % 281474976710656 AS d0_0,
    (
      (
        CAST(r0_1 % 281474976710656 AS BIGINT) - CAST(p0_1 % 281474976710656 AS BIGINT)
      ) % 281474976710656 + 281474976710656
    ) % 281474976710656 AS d0_1,
    (
      (
        CAST(r1_0 % 281474976710656 AS BIGINT) - CAST(p1_0 % 281474976710656 AS BIGINT)
      ) % 281474976710656 + 281474976710656
    ) % 281474976710656 AS d1_0,
    (
      (
        CAST(r1_1 % 281474976710656 AS BIGINT) - CAST(p1_1 % 281474976710656 AS BIGINT)
      ) % 281474976710656 + 281474976710656
    ) % 281474976710656 AS d1_1
  FROM lagged
  WHERE
    NOT p_ts IS NULL
), win AS (
  SELECT
    host,
    chip,
    g - 1 AS "window",
    p_ts AS start_ns,
    CAST(ts - p_ts AS DOUBLE) * 1e-09 AS interval_s,
    (
      CAST(p4_0 AS DOUBLE) + CAST(r4_0 AS DOUBLE)
    ) * 0.0005e0 AS i0_0,
    CASE
      WHEN (
        CAST(d2_0 AS DOUBLE) > 1000000000.0e0 * CAST(ts - p_ts AS DOUBLE) * 1e-09 / 1.0e0 + 1.0e0
        OR 1000000000.0e0 * CAST(ts - p_ts AS DOUBLE) * 1e-09 / 1.0e0 + 1.0e0 >= 4294967296.0e0
      )
      THEN NULL
      ELSE CAST(d2_0 AS DOUBLE) * 1.0e0
    END AS i1_0,
    CASE
      WHEN (
        CAST(d3_0 AS DOUBLE) > 1000000000.0e0 * CAST(ts - p_ts AS DOUBLE) * 1e-09 / 1.0e0 + 1.0e0
        OR 1000000000.0e0 * CAST(ts - p_ts AS DOUBLE) * 1e-09 / 1.0e0 + 1.0e0 >= 4294967296.0e0
        OR (
          r3_0 IN (4294967295) OR p3_0 IN (4294967295)
        )
      )
      THEN NULL
      ELSE CAST(d3_0 AS DOUBLE) * 1.0e0
    END AS i2_0,
    CASE WHEN d0_0 > 140737488355328 THEN NULL ELSE CAST(d0_0 AS DOUBLE) * 64.0e0 END AS i3_0,
    CASE WHEN d0_1 > 140737488355328 THEN NULL ELSE CAST(d0_1 AS DOUBLE) * 64.0e0 END AS i3_1,
    CASE WHEN d1_0 > 140737488355328 THEN NULL ELSE CAST(d1_0 AS DOUBLE) * 64.0e0 END AS i4_0,
    CASE WHEN d1_1 > 140737488355328 THEN NULL ELSE CAST(d1_1 AS DOUBLE) * 64.0e0 END AS i4_1
  FROM deltas
), l1 AS (
  SELECT
    *,
    i0_0 AS v0,
    (
      (
        i1_0 / NULLIF(i2_0, 0.0e0)
      ) * 100.0e0
    ) AS v2,
    (
      i3_0 + i3_1
    ) AS t4
  FROM win
), l2 AS (
  SELECT
    *,
    CASE WHEN v0 - v0 = 0.0e0 THEN v0 END AS m1,
    CASE WHEN v2 - v2 = 0.0e0 THEN v2 END AS m3,
    (
      (
        (
          t4 + (
            i4_0 + i4_1
          )
        ) / NULLIF(interval_s, 0.0e0)
      ) * 1e-09
    ) AS v5,
    (
      (
        t4 / NULLIF(interval_s, 0.0e0)
      ) * 1e-09
    ) AS v7
  FROM l1
), l3 AS (
  SELECT
    *,
    CASE WHEN v5 - v5 = 0.0e0 THEN v5 END AS m6,
    CASE WHEN v7 - v7 = 0.0e0 THEN v7 END AS m8
  FROM l2
), l4 AS (
  SELECT
    *,
    (
      (
        m6 / NULLIF(100.0e0, 0.0e0)
      ) * 100.0e0
    ) AS v9
  FROM l3
), l5 AS (
  SELECT
    *,
    CASE WHEN v9 - v9 = 0.0e0 THEN v9 END AS m10
  FROM l4
)
SELECT
  "window",
  host,
  chip,
  start_ns,
  interval_s,
  m1 AS "eng.power",
  m3 AS "eng.utilization",
  m6 AS "mem.bandwidth",
  m8 AS "mem.read_bandwidth",
  m10 AS "mem.utilization"
FROM l5
ORDER BY
  host,
  chip,
  "window";
