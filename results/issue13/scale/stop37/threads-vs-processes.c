#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <stdatomic.h>
enum { PIECE = 384, OF = 2 };
static int K; static size_t COUNT; static const char *PATH = "/tmp/s37/tvp.dat";
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void writer(int t){
  int fd=open(PATH,O_RDWR); size_t region=((COUNT*OF*PIECE)+4095)/4096*4096;
  size_t base=(t/OF)*region + (t%OF)*PIECE; size_t lo=base/4096*4096, hi=base+(COUNT-1)*OF*PIECE+PIECE;
  char*m=mmap(0,hi-lo,PROT_READ|PROT_WRITE,MAP_SHARED,fd,lo); madvise(m,hi-lo,MADV_HUGEPAGE);
  madvise(m,hi-lo,23); char buf[PIECE]; memset(buf,t+1,PIECE);
  for(size_t i=0;i<COUNT;i++) memcpy(m+(base-lo)+i*OF*PIECE,buf,PIECE);
  munmap(m,hi-lo); close(fd);
}
static void*thr(void*a){writer((int)(long)a);return 0;}
int main(int argc,char**argv){K=atoi(argv[1]);int procs=!strcmp(argv[2],"p");COUNT=(64<<20)/K/PIECE;
  unlink(PATH);int fd=open(PATH,O_RDWR|O_CREAT,0644);size_t region=((COUNT*OF*PIECE)+4095)/4096*4096;posix_fallocate(fd,0,region*(K/OF));close(fd);
  struct rusage r0,r1,c0,c1;getrusage(RUSAGE_SELF,&r0);getrusage(RUSAGE_CHILDREN,&c0);double s=now();
  if(procs){for(int t=0;t<K;t++) if(!fork()){writer(t);_exit(0);} while(wait(0)>0);}
  else{pthread_t th[64];for(int t=0;t<K;t++)pthread_create(&th[t],0,thr,(void*)(long)t);for(int t=0;t<K;t++)pthread_join(th[t],0);}
  double w=now()-s;getrusage(RUSAGE_SELF,&r1);getrusage(RUSAGE_CHILDREN,&c1);
  #define T(a,b) ((b.ru_utime.tv_sec-a.ru_utime.tv_sec)+(b.ru_utime.tv_usec-a.ru_utime.tv_usec)*1e-6+(b.ru_stime.tv_sec-a.ru_stime.tv_sec)+(b.ru_stime.tv_usec-a.ru_stime.tv_usec)*1e-6)
  double cpu=T(r0,r1)+T(c0,c1);
  printf("%s k=%d: %.0f MiB/s, cpu %.0f ms (%.2f cores)\n",procs?"procs  ":"threads",K,64/w,cpu*1e3,cpu/w);unlink(PATH);}
