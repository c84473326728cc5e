import json, sys, collections
cells = [(10, 'same_log_consume_cpu_us_per_msg'), (100, 'produce_cpu_us_per_msg'), (100, 'same_log_consume_cpu_us_per_msg'),
         (1000, 'consume_cpu_us_per_msg'), (100000, 'produce_cpu_us_per_msg')]
for path in sys.argv[1:]:
    r = collections.defaultdict(list)
    for l in open(path):
        d = json.loads(l)
        if d['axis'] != 'msgsize': continue
        for x, k in cells:
            if d['x'] == x and k in d:
                r[(x, k, d['label'])].append(d[k])
    print(path)
    for x, k in cells:
        a, b = r[(x, k, 'kbus')], r[(x, k, 'kbus-base')]
        print(f"  {x} B {k.replace('_cpu_us_per_msg','')}: kbus {' / '.join(f'{v:.3g}' for v in a)}; kbus-base {' / '.join(f'{v:.3g}' for v in b)}")
