#!/usr/bin/env bash
# Direct callees of a frame in a py-spy raw profile (`py-spy record -f raw`, gzipped): for every sample whose stack
# holds a frame matching REGEX (the outermost match), the next frame down ("<self>": the sample is in it).
#   usage: pyspy_children.sh PROFILE.raw.gz REGEX [TOP]
zcat "$1" | awk -v pat="$2" '{n=$NF; $NF=""; k=split($0,f,";"); for(i=1;i<=k;i++){ if (f[i] ~ pat) { ch = (i<k)? f[i+1] : "<self>"; sub(/ \(.*$/,"",ch); c[ch]+=n; break } } } END{for(x in c) print c[x], x}' | sort -rn | head -"${3:-25}"
