// Does work on CPU 1 slow a reader on CPU 0? The reader copies a 4 MiB region (as the
// versioning reader's 4 MiB reads) in a loop and times each copy; CPU 1 idles, spins
// (ALU only), or copies its own 4 MiB buffers (memory traffic), in alternating phases.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdatomic.h>
#define SZ (4u << 20)
static atomic_int mode; // 0 idle, 1 spin, 2 copy, 3 stop
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static void *other(void *a){(void)a;pin(1);char *x=malloc(SZ),*y=malloc(SZ);memset(x,1,SZ);memset(y,2,SZ);
 volatile unsigned long k=0; for(;;){int m=atomic_load(&mode); if(m==3)break;
  if(m==0){struct timespec t={0,200000};nanosleep(&t,0);} else if(m==1){for(int i=0;i<100000;i++)k+=i*i;} else {memcpy(y,x,SZ);x[k++%SZ]++;}}
 return 0;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){pin(0);char *src=malloc(SZ),*dst=malloc(SZ);memset(src,3,SZ);memset(dst,4,SZ);
 pthread_t t;pthread_create(&t,0,other,0);
 const char *names[]={"cpu1 idle","cpu1 spins","cpu1 copies 4 MiB"};
 enum{N=3000};static double lat[3][6*N];int cnt[3]={0};
 for(int round=0;round<6;round++)for(int m=0;m<3;m++){atomic_store(&mode,m);
  struct timespec w={0,20000000};nanosleep(&w,0);
  for(int i=0;i<N/6*6/6;i++){double t0=now();memcpy(dst,src,SZ);src[i%SZ]++;lat[m][cnt[m]++]=(now()-t0)/1e3;}}
 atomic_store(&mode,3);pthread_join(t,0);
 for(int m=0;m<3;m++){qsort(lat[m],cnt[m],sizeof(double),cmp);
  printf("%-20s n=%d median %.0f us p90 %.0f p99 %.0f\n",names[m],cnt[m],lat[m][cnt[m]/2],lat[m][cnt[m]*9/10],lat[m][cnt[m]*99/100]);}
 return 0;}
